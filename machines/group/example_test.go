package group_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/group"
	"github.com/zkrecipes/zkrecipes/testkit/sim"
)

// Two processes join /app/members, a third watches the group: each join,
// data change and departure comes as an event with the member's data, and
// an id another live session holds is refused.
func ExampleJoin() {
	s := sim.New()
	defer s.Close()
	ctx := context.Background()
	connA, connB, connW := s.Connect(), s.Connect(), s.Connect()
	defer connA.Close()
	defer connB.Close()
	defer connW.Close()

	g, err := group.Watch(connW, "/app/members")
	if err != nil {
		panic(err)
	}
	defer g.Close()
	sub := g.Subscribe()
	defer sub.Close()
	next := func() { // prints the next member event
		for ev := range sub.C {
			switch ev.Type {
			case events.MemberJoined, events.MemberUpdated, events.MemberLeft:
				fmt.Println(ev.Type, ev.Node, string(ev.Data))
				return
			}
		}
	}

	a, err := group.Join(ctx, connA, "/app/members", "node-a", []byte("10.0.0.5:8080"))
	if err != nil {
		panic(err)
	}
	defer a.Close()
	next()
	b, err := group.Join(ctx, connB, "/app/members", "node-b", []byte("10.0.0.6:8080"))
	if err != nil {
		panic(err)
	}
	next()
	if err := a.SetData(ctx, []byte("10.0.0.7:8080")); err != nil {
		panic(err)
	}
	next()
	_, err = group.Join(ctx, connB, "/app/members", "node-a", nil)
	fmt.Println(errors.Is(err, group.ErrMemberExists))
	if err := b.Leave(ctx); err != nil {
		panic(err)
	}
	next()
	for id, data := range g.Members() {
		fmt.Println(id, string(data))
	}
	// Output:
	// MEMBER_JOINED /app/members/node-a 10.0.0.5:8080
	// MEMBER_JOINED /app/members/node-b 10.0.0.6:8080
	// MEMBER_UPDATED /app/members/node-a 10.0.0.7:8080
	// true
	// MEMBER_LEFT /app/members/node-b 10.0.0.6:8080
	// node-a 10.0.0.7:8080
}
