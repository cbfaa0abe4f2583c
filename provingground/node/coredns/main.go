// Command coredns is CoreDNS (github.com/coredns/coredns, the version in go.mod) with only the
// plugins the proving ground's cluster DNS uses, as CoreDNS documents for custom builds: the
// plugins register themselves when imported, and coremain runs the server with the standard
// plugin order (core/dnsserver's directive list). provingground/node/configs.py writes the
// Corefile.
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/core/dnsserver"
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

func main() { coremain.Run() }
