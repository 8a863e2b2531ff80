// Command compose-check loads a Compose file the way `docker compose config`
// does, with the Compose Specification's own loader (compose-go): the file
// is validated against the specification's JSON schema, interpolated,
// normalised and checked for consistency (durations, depends_on naming
// defined services, conditions, ports). No Docker is needed, so CI checks
// docker-compose.yml on every change (scripts/check-deploy.sh).
//
// Usage: compose-check FILE
//
// Exits 0 and prints the services it found when the file loads; exits 1
// with the loader's error otherwise.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/compose-spec/compose-go/v2/cli"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: compose-check FILE")
		os.Exit(64)
	}
	if err := check(context.Background(), os.Args[1]); err != nil {
		fmt.Fprintf(os.Stderr, "compose-check: %v\n", err)
		os.Exit(1)
	}
}

// check loads the file as `docker compose config` would, with the file's
// directory as the project directory.
func check(ctx context.Context, file string) error {
	path, err := filepath.Abs(file)
	if err != nil {
		return err
	}
	options, err := cli.NewProjectOptions(
		[]string{path},
		cli.WithName("redlockd"),
		cli.WithWorkingDirectory(filepath.Dir(path)),
	)
	if err != nil {
		return err
	}
	project, err := options.LoadProject(ctx)
	if err != nil {
		return err
	}
	names := project.ServiceNames()
	sort.Strings(names)
	fmt.Printf("%s: %d services (%s)\n", file, len(names), strings.Join(names, ", "))
	return nil
}
