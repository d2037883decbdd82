package plugin

import (
	"fmt"
	"io"
	"strings"

	"k8s.io/cli-runtime/pkg/printers"
)

// printer writes what a command prints to the user. It keeps the first
// write error and writes nothing after it, so that a command prints line
// by line and returns err once, at the end: output that never reached the
// user (a closed pipe, a full disk) fails the command, as a failed table
// flush or YAML print already does, instead of exiting as if it had been
// read.
type printer struct {
	w   io.Writer
	err error
}

// printf writes, unless an earlier write failed.
func (p *printer) printf(format string, a ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, a...)
	}
}

// table writes rows of cells aligned in columns, as kubectl's tables: the
// first row is the header.
func (p *printer) table(rows [][]string) {
	if p.err != nil {
		return
	}
	tw := printers.GetNewTabWriter(p.w)
	for _, row := range rows {
		if _, p.err = fmt.Fprintln(tw, strings.Join(row, "\t")); p.err != nil {
			return
		}
	}
	p.err = tw.Flush()
}
