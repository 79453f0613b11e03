package discovery_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/discovery"
	"github.com/zkrecipes/zkrecipes/testkit/sim"
)

// Two instances of "api" register under /services, as Curator's
// ServiceDiscovery writes them; a client on another connection follows
// the service and picks an instance per call, round robin, from memory.
// When an instance deregisters (or its process dies and its session
// expires) the client stops picking it.
func ExampleRegister() {
	s := sim.New()
	defer s.Close()
	ctx := context.Background()
	connA, connB, client := s.Connect(), s.Connect(), s.Connect()
	defer connA.Close()
	defer connB.Close()
	defer client.Close()

	a, err := discovery.Register(ctx, connA, "/services", discovery.Instance{
		Name: "api", ID: "i-1", Address: "10.0.0.5", Port: 8080, Payload: json.RawMessage(`{"zone":"a"}`)})
	if err != nil {
		panic(err)
	}
	defer a.Close()
	b, err := discovery.Register(ctx, connB, "/services", discovery.Instance{
		Name: "api", ID: "i-2", Address: "10.0.0.6", Port: 8080, Payload: json.RawMessage(`{"zone":"b"}`)})
	if err != nil {
		panic(err)
	}

	p, err := discovery.NewProvider(client, "/services", "api", discovery.WithStrategy(discovery.RoundRobin))
	if err != nil {
		panic(err)
	}
	defer p.Close()
	sub := p.Subscribe()
	defer sub.Close()
	for range 3 {
		inst, err := p.Instance(ctx) // waits for the first load only
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s %s:%d %s\n", inst.ID, inst.Address, inst.Port, inst.Payload)
	}

	if err := b.Close(); err != nil { // deregisters
		panic(err)
	}
	for ev := range sub.C {
		if ev.Type == events.MemberLeft {
			break
		}
	}
	for _, inst := range p.Instances() {
		fmt.Println("left:", inst.ID)
	}
	names, err := discovery.Services(ctx, client, "/services")
	fmt.Println(names, err)
	// Output:
	// i-1 10.0.0.5:8080 {"zone":"a"}
	// i-2 10.0.0.6:8080 {"zone":"b"}
	// i-1 10.0.0.5:8080 {"zone":"a"}
	// left: i-1
	// [api] <nil>
}
