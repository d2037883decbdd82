// Command coredns is CoreDNS with only the plugins the real-node suite
// needs to answer cluster names: kubernetes (a pod's
// <hostname>.<subdomain>.<namespace>.svc name, from the EndpointSlices of a
// headless Service), bind (listen on one address), errors and log. It is a
// tools module of its own: nothing in podset-operator imports it. CoreDNS's
// own main (github.com/coredns/coredns, coredns.go) imports every plugin
// through core/plugin; this one imports four, so that the build compiles
// none of the cloud providers' SDKs.
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
)

func main() {
	coremain.Run()
}
