// Command modsync keeps the Go modules of this repository on one set of
// dependency versions: the main module and every tools module under hack/
// (hack/*/go.mod), each of which builds tools the Makefile needs.
//
// Go's build cache keys a compiled package by its module path and version
// (with -trimpath, the version the go.mod files select, v0.0.0 for a
// replaced Kubernetes staging module) and by the compiled packages it
// imports. The same package at two versions, or at one version over two
// versions of a dependency, is compiled twice: on a cold cache, minutes of
// the first `make test`.
//
//	go run ./hack/modsync        fail when two go.mod files require one module at two versions
//	go run ./hack/modsync -fix   raise every such module to its highest version in every go.mod
//	go run ./hack/modsync -dups  count the packages that the builds of every module compile more than once
//
// -dups lists the packages with `go list -deps` (nothing is compiled). Each
// -at MODULE@VERSION=PKG,... adds a build from the module cache with that
// module's own go.mod, as `go install PKG@VERSION` builds it.
package main

import (
	"bufio"
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

func main() {
	fix := flag.Bool("fix", false, "raise every module required at two versions to the highest in every go.mod that requires it, until they agree")
	dups := flag.Bool("dups", false, "count the packages compiled more than once across the builds, instead of checking the go.mod files")
	var at []string
	flag.Func("at", "MODULE@VERSION=PKG,PKG: with -dups, also a build from the module cache (repeatable)", func(s string) error {
		at = append(at, s)
		return nil
	})
	flag.Parse()
	mods, err := filepath.Glob("hack/*/go.mod")
	if err != nil {
		fail(err)
	}
	mods = append([]string{"go.mod"}, mods...)
	switch {
	case *dups:
		err = countDuplicates(mods, at)
	case *fix:
		err = raise(mods)
	default:
		err = check(mods)
	}
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "modsync:", err)
	os.Exit(1)
}

// requirements returns, for every module that a go.mod file requires, the
// go.mod files that require it by version.
func requirements(mods []string) (map[string]map[string][]string, error) {
	versions := map[string]map[string][]string{}
	for _, mod := range mods {
		out, err := run(filepath.Dir(mod), nil, "go", "mod", "edit", "-json")
		if err != nil {
			return nil, err
		}
		var file struct {
			Require []struct{ Path, Version string }
		}
		if err := json.Unmarshal(out, &file); err != nil {
			return nil, fmt.Errorf("%s: %w", mod, err)
		}
		for _, r := range file.Require {
			if versions[r.Path] == nil {
				versions[r.Path] = map[string][]string{}
			}
			versions[r.Path][r.Version] = append(versions[r.Path][r.Version], mod)
		}
	}
	return versions, nil
}

// check fails when two go.mod files require one module at two versions, or
// one requires a module at v0.0.0: k8s.io/kubernetes requires its staging
// modules so and hack/controlplane replaces them with published versions,
// but with -trimpath the build cache keys a package by the required version,
// so k8s.io/api "v0.0.0" would compile apart from k8s.io/api v0.37.1 of the
// same source.
func check(mods []string) error {
	versions, err := requirements(mods)
	if err != nil {
		return err
	}
	var disagree []string
	for path, byVersion := range versions {
		if files, ok := byVersion["v0.0.0"]; ok {
			disagree = append(disagree, fmt.Sprintf("%s: v0.0.0 (%s), a replaced placeholder: require the version it is replaced with", path, strings.Join(files, ", ")))
			continue
		}
		if len(byVersion) < 2 {
			continue
		}
		line := path + ":"
		for _, v := range slices.Sorted(maps.Keys(byVersion)) {
			line += fmt.Sprintf(" %s (%s)", v, strings.Join(byVersion[v], ", "))
		}
		disagree = append(disagree, line)
	}
	if len(disagree) == 0 {
		fmt.Printf("modsync: %d go.mod files, %d modules, one version each\n", len(mods), len(versions))
		return nil
	}
	slices.Sort(disagree)
	fmt.Fprintf(os.Stderr, "modsync: %d modules are required at more than one version (or at v0.0.0); each version is compiled apart:\n", len(disagree))
	for _, l := range disagree {
		fmt.Fprintln(os.Stderr, "  "+l)
	}
	return fmt.Errorf("give every go.mod the highest version (go run ./hack/modsync -fix) and check that the tools still build")
}

// raise runs `go get MODULE@HIGHEST` in every module that requires a lower
// version of a module that another go.mod requires, then `go mod tidy`,
// until the go.mod files agree: an upgrade can raise further modules.
func raise(mods []string) error {
	for round := 1; ; round++ {
		versions, err := requirements(mods)
		if err != nil {
			return err
		}
		gets := raises(versions)
		if len(gets) == 0 {
			return check(mods)
		}
		if round > 10 {
			return fmt.Errorf("the go.mod files still disagree after 10 rounds")
		}
		for _, dir := range slices.Sorted(maps.Keys(gets)) {
			slices.Sort(gets[dir])
			fmt.Printf("round %d, %s: go get %s\n", round, dir, strings.Join(gets[dir], " "))
			if _, err := run(dir, nil, "go", append([]string{"get"}, gets[dir]...)...); err != nil {
				return err
			}
			if _, err := run(dir, nil, "go", "mod", "tidy"); err != nil {
				return err
			}
		}
	}
}

// raises is, by go.mod folder, the MODULE@VERSION arguments of the go get
// that raises each module the go.mod requires to the highest version any
// go.mod requires (versions: by module, the go.mod files by version).
func raises(versions map[string]map[string][]string) map[string][]string {
	gets := map[string][]string{}
	for path, byVersion := range versions {
		if len(byVersion) < 2 {
			continue
		}
		highest := slices.MaxFunc(slices.Collect(maps.Keys(byVersion)), compareSemver)
		for v, files := range byVersion {
			if v == highest {
				continue
			}
			for _, f := range files {
				gets[filepath.Dir(f)] = append(gets[filepath.Dir(f)], path+"@"+highest)
			}
		}
	}
	return gets
}

// compareSemver orders two module versions by semantic versioning.
func compareSemver(a, b string) int {
	coreA, preA := splitVersion(a)
	coreB, preB := splitVersion(b)
	for i := range 3 {
		if c := cmp.Compare(coreA[i], coreB[i]); c != 0 {
			return c
		}
	}
	switch {
	case preA == preB:
		return 0
	case preA == "":
		return 1
	case preB == "":
		return -1
	}
	idsA, idsB := strings.Split(preA, "."), strings.Split(preB, ".")
	for i := 0; i < len(idsA) && i < len(idsB); i++ {
		x, y := idsA[i], idsB[i]
		nx, errX := strconv.Atoi(x)
		ny, errY := strconv.Atoi(y)
		var c int
		switch {
		case errX == nil && errY == nil:
			c = cmp.Compare(nx, ny)
		case errX == nil:
			c = -1
		case errY == nil:
			c = 1
		default:
			c = strings.Compare(x, y)
		}
		if c != 0 {
			return c
		}
	}
	return cmp.Compare(len(idsA), len(idsB))
}

// splitVersion splits vX.Y.Z-pre+build into [X Y Z] and pre.
func splitVersion(v string) ([3]int, string) {
	v = strings.TrimPrefix(v, "v")
	v, _, _ = strings.Cut(v, "+")
	core, pre, _ := strings.Cut(v, "-")
	var n [3]int
	for i, f := range strings.SplitN(core, ".", 3) {
		n[i], _ = strconv.Atoi(f)
	}
	return n, pre
}

// A build is one `go list -deps` of the Makefile's: the packages of a
// module, with tags and tests as the Makefile builds them.
type build struct {
	name string
	dir  string
	args []string
}

// builds lists the Makefile's builds: the main module's packages with their
// tests (untagged, e2e, node) and its tools (helm), and what each tools
// module's tools.go imports.
func builds(mods []string) ([]build, error) {
	bs := []build{
		{"main: go test ./...", ".", []string{"-test", "./..."}},
		{"main: e2e suite", ".", []string{"-test", "-tags", "e2e", "./test/e2e/"}},
		{"main: node suite", ".", []string{"-test", "-tags", "node", "./test/node/"}},
		{"main: tools (helm)", ".", []string{"tool"}},
	}
	for _, mod := range mods[1:] {
		dir := filepath.Dir(mod)
		out, err := run(dir, nil, "go", "list", "-e", "-tags", "tools", "-f", `{{join .Imports " "}}`, ".")
		if err != nil {
			return nil, err
		}
		bs = append(bs, build{dir, dir, strings.Fields(string(out))})
	}
	return bs, nil
}

// A pkg is a package of a dependency module as go list reports it.
type pkg struct {
	ImportPath string
	Dir        string
	Standard   bool
	Module     *struct {
		Path, Version string
		Main          bool
	}
	Imports, GoFiles, CgoFiles, SFiles []string
}

// countDuplicates prints how many dependency packages the builds compile,
// how many of those compilations repeat a package already compiled for
// another build (at another version, or over other versions of what it
// imports) and their source size.
func countDuplicates(mods, at []string) error {
	bs, err := builds(mods)
	if err != nil {
		return err
	}
	more, err := atBuilds(at)
	if err != nil {
		return err
	}
	c := compileKeys{keys: map[string]map[string]bool{}, size: map[string]int64{}, moduleOf: map[string]string{}}
	for _, b := range append(bs, more...) {
		pkgs, err := list(b)
		if err != nil {
			return err
		}
		fmt.Printf("%-40s %5d dependency packages\n", b.name, c.add(pkgs))
	}
	c.report()
	return nil
}

// atBuilds are the builds -at names: MODULE@VERSION=PKG,PKG, the packages
// of that module version, downloaded.
func atBuilds(at []string) ([]build, error) {
	var bs []build
	for _, a := range at {
		modVersion, pkgs, ok := strings.Cut(a, "=")
		if !ok {
			return nil, fmt.Errorf("-at %s: want MODULE@VERSION=PKG,PKG", a)
		}
		out, err := run(".", nil, "go", "mod", "download", "-json", modVersion)
		if err != nil {
			return nil, err
		}
		var m struct{ Dir string }
		if err := json.Unmarshal(out, &m); err != nil {
			return nil, err
		}
		bs = append(bs, build{modVersion, m.Dir, strings.Split(pkgs, ",")})
	}
	return bs, nil
}

// compileKeys are the compilations of dependency packages over builds: a
// package is compiled once per compile key (its module version and the
// keys of what it imports).
type compileKeys struct {
	// keys is, by import path, the set of compile keys of the package;
	// size and moduleOf are by key.
	keys     map[string]map[string]bool
	size     map[string]int64
	moduleOf map[string]string
}

// add adds the dependency packages of one build and returns how many it
// compiles.
func (c *compileKeys) add(pkgs map[string]*pkg) int {
	key := map[string]string{}
	n := 0
	for path := range pkgs {
		if c.keyOf(pkgs, key, path) != "" {
			n++
		}
	}
	return n
}

// keyOf is the compile key of the package at path in a build whose
// packages are pkgs, remembered in key; "" for the standard library and
// the main module.
func (c *compileKeys) keyOf(pkgs map[string]*pkg, key map[string]string, path string) string {
	if k, ok := key[path]; ok {
		return k
	}
	p := pkgs[path]
	if p == nil || p.Standard || p.Module == nil || p.Module.Main {
		key[path] = ""
		return ""
	}
	key[path] = "" // an import cycle is impossible; this ends one anyway
	h := sha256.New()
	_, _ = fmt.Fprintf(h, "%s %s@%s\n", p.ImportPath, p.Module.Path, p.Module.Version) // a hash.Hash never fails a write
	var deps []string
	for _, imp := range p.Imports {
		if k := c.keyOf(pkgs, key, imp); k != "" {
			deps = append(deps, k)
		}
	}
	slices.Sort(deps)
	_, _ = fmt.Fprintln(h, strings.Join(deps, " "))
	k := fmt.Sprintf("%x", h.Sum(nil))
	key[path] = k
	if c.keys[path] == nil {
		c.keys[path] = map[string]bool{}
	}
	c.keys[path][k] = true
	c.moduleOf[k] = p.Module.Path + "@" + p.Module.Version
	c.size[k] = sourceSize(p)
	return k
}

// report prints how many compilations there are, how many repeat a
// package already compiled, the modules at more than one version and the
// module versions compiled most often.
func (c *compileKeys) report() {
	var compiles, extra int
	var total, extraSize int64
	repeated := map[string]int{} // module@version: its extra compilations
	versions := map[string]map[string]bool{}
	for _, ks := range c.keys {
		compiles += len(ks)
		for i, k := range slices.Sorted(maps.Keys(ks)) {
			total += c.size[k]
			mv := c.moduleOf[k]
			mp, v, _ := strings.Cut(mv, "@")
			if versions[mp] == nil {
				versions[mp] = map[string]bool{}
			}
			versions[mp][v] = true
			if i > 0 {
				extra++
				extraSize += c.size[k]
				repeated[mv]++
			}
		}
	}
	fmt.Printf("\n%d compilations of %d dependency packages, %.1f MB of Go source\n", compiles, len(c.keys), mb(total))
	fmt.Printf("%d compilations repeat a package (%.1f MB), from %d module versions\n", extra, mb(extraSize), len(repeated))
	var multi []string
	for mp, vs := range versions {
		if len(vs) > 1 {
			multi = append(multi, fmt.Sprintf("%s %s", mp, strings.Join(slices.Sorted(maps.Keys(vs)), " ")))
		}
	}
	slices.Sort(multi)
	fmt.Printf("%d modules at more than one version:\n", len(multi))
	for _, m := range multi {
		fmt.Println("  " + m)
	}
	top := slices.SortedFunc(maps.Keys(repeated), func(a, b string) int { return cmp.Compare(repeated[b], repeated[a]) })
	fmt.Println("most repeated module versions (extra compilations):")
	for _, mv := range top[:min(len(top), 15)] {
		fmt.Printf("  %4d %s\n", repeated[mv], mv)
	}
}

func mb(n int64) float64 { return float64(n) / 1e6 }

// list returns the packages of build b, by import path.
func list(b build) (map[string]*pkg, error) {
	out, err := run(b.dir, []string{"CGO_ENABLED=0", "GOFLAGS=-trimpath -mod=readonly"}, "go", append([]string{"list", "-deps", "-json=ImportPath,Dir,Standard,Module,Imports,GoFiles,CgoFiles,SFiles"}, b.args...)...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", b.name, err)
	}
	pkgs := map[string]*pkg{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		p := new(pkg)
		if err := dec.Decode(p); err != nil {
			return nil, err
		}
		pkgs[p.ImportPath] = p
	}
	return pkgs, nil
}

// sourceSize is the size of the files the compiler reads for p.
func sourceSize(p *pkg) int64 {
	var n int64
	for _, files := range [][]string{p.GoFiles, p.CgoFiles, p.SFiles} {
		for _, f := range files {
			if fi, err := os.Stat(filepath.Join(p.Dir, f)); err == nil {
				n += fi.Size()
			}
		}
	}
	return n
}

// run runs a command in dir with env added and returns its output.
func run(dir string, env []string, name string, args ...string) ([]byte, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s %s in %s: %w\n%s", name, strings.Join(args, " "), dir, err, firstLines(stderr.String(), 10))
	}
	return out, nil
}

func firstLines(s string, n int) string {
	var b strings.Builder
	sc := bufio.NewScanner(strings.NewReader(s))
	for i := 0; i < n && sc.Scan(); i++ {
		b.WriteString(sc.Text() + "\n")
	}
	return b.String()
}
