//go:build gitops

package gitops

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
)

// auditPolicy has the kube-apiserver log, once answered, every request on
// PodSets and their subresources, with who sent it; nothing else.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  resources:
  - group: podset.dev
    resources: [podsets, podsets/status, podsets/scale]
- level: None
`

// auditEvent is what the suite reads of an audit log line.
type auditEvent struct {
	Stage      string `json:"stage"`
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	UserAgent string `json:"userAgent"`
	ObjectRef struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// dryRun is whether the request was a dry run, which writes nothing.
func (e auditEvent) dryRun() bool { return strings.Contains(e.RequestURI, "dryRun=All") }

// write is whether the request asked to change the object.
func (e auditEvent) write() bool {
	switch e.Verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// String names the request, its agent and its answer.
func (e auditEvent) String() string {
	agent, _, _ := strings.Cut(e.UserAgent, " ")
	return fmt.Sprintf("%s %s (%s, %d)", e.Verb, e.RequestURI, agent, e.ResponseStatus.Code)
}

// auditMark is a place in the audit log: requests after it are read by
// requestsSince.
type auditMark int64

// markAudit returns the end of the audit log as it is now.
func markAudit(t *testing.T) auditMark {
	t.Helper()
	info, err := os.Stat(suite.auditLog)
	if err != nil {
		t.Fatal(err)
	}
	return auditMark(info.Size())
}

// requestsSince returns the answered requests on the PodSet ns/name (and
// its subresources) logged after mark.
func requestsSince(t *testing.T, mark auditMark, ns, name string) []auditEvent {
	t.Helper()
	f, err := os.Open(suite.auditLog)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	if _, err := f.Seek(int64(mark), io.SeekStart); err != nil {
		t.Fatal(err)
	}
	var events []auditEvent
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 0, 1<<16), 1<<22)
	for scanner.Scan() {
		var e auditEvent
		if err := json.Unmarshal(scanner.Bytes(), &e); err != nil {
			// The kube-apiserver may be writing the last line.
			continue
		}
		if e.Stage == "ResponseComplete" && e.ObjectRef.Namespace == ns && e.ObjectRef.Name == name {
			events = append(events, e)
		}
	}
	if err := scanner.Err(); err != nil {
		t.Fatal(err)
	}
	return events
}
