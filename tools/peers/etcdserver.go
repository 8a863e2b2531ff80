package main

import (
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// etcdServer runs one etcd 3.7 member at its defaults (fsync on every
// commit, as users run it) until SIGTERM or SIGINT.
func etcdServer(args []string) error {
	flags := flag.NewFlagSet("etcd-server", flag.ExitOnError)
	dir := flags.String("data-dir", "", "the member's data directory (required)")
	client := flags.String("client", "127.0.0.1:2379", "client address, HOST:PORT")
	peer := flags.String("peer", "127.0.0.1:2380", "peer address, HOST:PORT")
	logLevel := flags.String("log-level", "warn", "etcd's log level")
	_ = flags.Parse(args)
	if *dir == "" {
		return errors.New("--data-dir is required")
	}
	clientURL := url.URL{Scheme: "http", Host: *client}
	peerURL := url.URL{Scheme: "http", Host: *peer}
	cfg := embed.NewConfig()
	cfg.Name = "bench"
	cfg.Dir = *dir
	cfg.LogLevel = *logLevel
	cfg.ListenClientUrls = []url.URL{clientURL}
	cfg.AdvertiseClientUrls = []url.URL{clientURL}
	cfg.ListenPeerUrls = []url.URL{peerURL}
	cfg.AdvertisePeerUrls = []url.URL{peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)

	// Asked for before the start, so that a SIGTERM during it is not lost.
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	server, err := embed.StartEtcd(cfg)
	if err != nil {
		return err
	}
	defer server.Close()
	select {
	case <-server.Server.ReadyNotify():
	case err := <-server.Err():
		return err
	case <-stop:
		return nil
	case <-time.After(60 * time.Second):
		return errors.New("not ready within 60 s")
	}
	fmt.Printf("ready %s\n", clientURL.String())
	select {
	case <-stop:
		return nil
	case err := <-server.Err():
		return err
	}
}
