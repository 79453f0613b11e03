package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/machines/discovery"
)

// service is one line of zkr services BASE: a service and how many
// instance nodes it has.
type service struct {
	Name      string `json:"name"`
	Instances int    `json:"instances"`
}

// instance is one line of zkr services BASE NAME, in Curator's field names.
type instance struct {
	ID      string          `json:"id"`
	Address string          `json:"address"`
	Port    int             `json:"port"`
	SSLPort int             `json:"sslPort,omitempty"`
	Payload json.RawMessage `json:"payload"`
}

// servicesCmd lists the services registered under BASE (machines/discovery,
// or Curator's ServiceDiscovery) with their numbers of instances, or the
// instances of the service NAME.
func servicesCmd(e *env, args []string) int {
	c := newCommon("services", "zkr services [flags] BASE [NAME]", e.stderr)
	if err := c.parse(args); err != nil {
		return e.fail("services", err)
	}
	if n := c.fs.NArg(); n < 1 || n > 2 {
		return e.fail("services", usagef("want BASE [NAME], got %q (-h for usage)", c.fs.Args()))
	}
	base, name := c.fs.Arg(0), c.fs.Arg(1)
	if err := checkPath(base); err != nil {
		return e.fail("services", err)
	}
	if c.fs.NArg() == 2 {
		if name == "" || strings.Contains(name, "/") || zk.ValidatePath(zk.Join(base, name)) != nil {
			return e.fail("services", usagef("bad NAME %q: want one node name", name))
		}
	}
	ctx, conn, done, err := e.session(c)
	if err != nil {
		return e.fail("services", err)
	}
	defer done()
	if c.fs.NArg() == 1 {
		err = listServices(ctx, c, e, conn, base)
	} else {
		err = listInstances(ctx, c, e, conn, base, name)
	}
	if err != nil {
		return e.fail("services", waitErr(ctx, err))
	}
	return 0
}

// listServices prints each service under base and its number of
// instance nodes.
func listServices(ctx context.Context, c *common, e *env, conn zk.Conn, base string) error {
	if err := mustExist(ctx, conn, base); err != nil {
		return err
	}
	names, err := discovery.Services(ctx, conn, base)
	if err != nil {
		return err
	}
	for _, name := range names {
		kids, _, err := conn.Children(ctx, zk.Join(base, name))
		if errors.Is(err, zk.ErrNoNode) {
			continue // gone since the listing
		}
		if err != nil {
			return err
		}
		c.print(e.stdout, name+"\t"+strconv.Itoa(len(kids)), service{name, len(kids)})
	}
	return nil
}

// listInstances prints the instances of the service name under base, by
// id: those whose node holds a service instance's JSON.
func listInstances(ctx context.Context, c *common, e *env, conn zk.Conn, base, name string) error {
	if err := mustExist(ctx, conn, zk.Join(base, name)); err != nil {
		return err
	}
	p, err := discovery.NewProvider(conn, base, name)
	if err != nil {
		return err
	}
	defer p.Close()
	if err := p.Initialized(ctx); err != nil {
		return err
	}
	for _, in := range p.Instances() {
		payload := in.Payload
		if payload == nil {
			payload = json.RawMessage("null")
		}
		text, err := json.Marshal(payload) // compact: one line
		if err != nil {
			return err
		}
		c.print(e.stdout, fmt.Sprintf("%s\t%s\t%s\t%s", in.ID, orDash(in.Address), orDash(portText(in.Port)), text),
			instance{in.ID, in.Address, in.Port, in.SSLPort, payload})
	}
	return nil
}

func portText(port int) string {
	if port == 0 {
		return ""
	}
	return strconv.Itoa(port)
}

// orDash is s, or "-" for an empty s (an empty column would vanish for
// read(1)).
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
