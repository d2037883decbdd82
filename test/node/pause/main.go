// Command pause is the pod sandbox's process, as registry.k8s.io/pause is:
// it holds the pod's namespaces open until SIGTERM or SIGINT and, being
// PID 1 when the pod shares its PID namespace, reaps orphaned children.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// Separate channels, so a pending SIGCHLD never crowds out SIGTERM.
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	child := make(chan os.Signal, 1)
	signal.Notify(child, syscall.SIGCHLD)
	for {
		select {
		case <-stop:
			return
		case <-child:
			reapChildren()
		}
	}
}

// reapChildren collects every exited child; several SIGCHLDs can arrive as one.
func reapChildren() {
	for {
		pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
