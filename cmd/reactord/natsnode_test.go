package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// natsNode runs one node of a NATS cluster with JetStream, for the cluster
// tests: a process of its own (this test binary in the role "natsnode"),
// so a test can kill it with SIGKILL.
func natsNode(args []string) {
	fs := flag.NewFlagSet("natsnode", flag.ExitOnError)
	name := fs.String("name", "n1", "server name")
	port := fs.Int("port", 0, "client port")
	httpPort := fs.Int("http", 0, "monitoring port")
	clusterPort := fs.Int("cluster", 0, "cluster (route) port")
	routes := fs.String("routes", "", "comma-separated nats-route:// URLs of the cluster's nodes")
	dir := fs.String("store", "", "JetStream store directory")
	_ = fs.Parse(args)
	srv, err := server.NewServer(&server.Options{
		ServerName: *name, Host: "127.0.0.1", Port: *port, HTTPHost: "127.0.0.1", HTTPPort: *httpPort,
		JetStream: true, StoreDir: *dir, NoSigs: true, Logtime: true,
		Cluster: server.ClusterOpts{Name: "reactord-test", Host: "127.0.0.1", Port: *clusterPort},
		Routes:  server.RoutesFromStr(*routes),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	srv.ConfigureLogger() // to stderr, which the test shows when it fails
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		fmt.Fprintln(os.Stderr, "not ready within 10s")
		os.Exit(1)
	}
	srv.WaitForShutdown()
}
