// Command containerd is containerd and ctr in one binary (provingground/node/build.sh): the
// upstream commands of github.com/containerd/containerd/v2, linked unchanged, sharing one copy of
// the client, gRPC and protobuf code, so less has to be sent to the GPU machine. It dispatches on
// the name it was started as (copy or hard-link it to ctr), or on its first argument.
// containerd-shim-runc-v2 stays its own binary: its task plugin would register in the daemon.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	_ "github.com/containerd/containerd/v2/cmd/containerd/builtins"
	"github.com/containerd/containerd/v2/cmd/containerd/command"
	"github.com/containerd/containerd/v2/cmd/ctr/app"
)

func main() {
	name := filepath.Base(os.Args[0])
	if len(os.Args) > 1 && (os.Args[1] == "containerd" || os.Args[1] == "ctr") {
		name = os.Args[1]
		os.Args = os.Args[1:]
	}
	ctx := context.Background()
	var err error
	switch name {
	case "ctr":
		err = app.New().Run(ctx, os.Args)
	default:
		err = command.App().Run(ctx, os.Args)
	}
	if err != nil {
		_, _ = fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}
