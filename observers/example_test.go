package observers_test

import (
	"bytes"
	"context"
	"fmt"
	"os"

	"github.com/rs/zerolog"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/lock"
	"github.com/zkrecipes/zkrecipes/observers"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// A lock logged at info level: a line when an attempt starts, when the
// lock is granted, and when the attempt ends (the release begins, and
// completes). (Node names, holding a random
// uuid, are left out here to keep the output stable.)
func ExampleLog() {
	ctx := context.Background()
	sim := testkit.NewSim()
	defer sim.Close()
	l, err := lock.New(sim.Connect(), "/app/locks/orders", lock.WithID("worker-1"))
	if err != nil {
		panic(err)
	}
	console := zerolog.ConsoleWriter{Out: os.Stdout, NoColor: true,
		PartsExclude: []string{zerolog.TimestampFieldName}, FieldsExclude: []string{"node"}}
	logs := observers.Log(l, zerolog.New(console).Level(zerolog.InfoLevel))

	if _, err := l.Acquire(ctx); err != nil {
		panic(err)
	}
	if err := l.Release(ctx); err != nil {
		panic(err)
	}
	l.Close()
	<-logs.Done() // every event handled
	// Output:
	// INF OFFER_START event=OFFER_START instance=worker-1 path=/app/locks/orders phase=begin recipe=lock session=0x100000000000001 state=OFFER term=1
	// INF ELECTED_COMPLETE event=ELECTED_COMPLETE instance=worker-1 path=/app/locks/orders phase=granted recipe=lock session=0x100000000000001 state=LEADER term=1 token=0x8
	// INF STOP_START event=STOP_START instance=worker-1 path=/app/locks/orders phase=ended recipe=lock session=0x100000000000001 state=STOP term=1 token=0x8
	// INF STOP_COMPLETE event=STOP_COMPLETE instance=worker-1 path=/app/locks/orders phase=ended recipe=lock session=0x100000000000001 state=STOP term=1
}

// A timeline written while two workers take turns, read back.
func ExampleTimeline() {
	ctx := context.Background()
	sim := testkit.NewSim()
	defer sim.Close()
	a, _ := lock.New(sim.Connect(), "/app/locks/orders", lock.WithID("a"))
	b, _ := lock.New(sim.Connect(), "/app/locks/orders", lock.WithID("b"))
	var file bytes.Buffer
	tl := observers.Timeline(b, &file)

	if _, err := a.Acquire(ctx); err != nil {
		panic(err)
	}
	sub := b.Subscribe()
	granted := make(chan error)
	go func() {
		_, err := b.Acquire(ctx) // waits for a
		granted <- err
	}()
	for ev := range sub.C {
		if ev.Type == events.ReadyStart {
			break // b waits on a's node
		}
	}
	sub.Close()
	a.Release(ctx)
	if err := <-granted; err != nil {
		panic(err)
	}
	b.Close()
	a.Close()
	<-tl.Done()

	recs, err := observers.ReadTimeline(&file)
	if err != nil {
		panic(err)
	}
	for _, r := range recs {
		if r.Type != events.Start { // may precede the subscription
			fmt.Println(r.Instance, r.Term, r.Type, r.State)
		}
	}
	// Output:
	// b 1 OFFER_START OFFER
	// b 1 OFFER_COMPLETE OFFER
	// b 1 DETERMINE_START DETERMINE
	// b 1 DETERMINE_COMPLETE DETERMINE
	// b 1 READY_START READY
	// b 1 READY_COMPLETE READY
	// b 1 ELECTED_START LEADER
	// b 1 ELECTED_COMPLETE LEADER
	// b 1 STOP_START STOP
	// b 1 STOP_COMPLETE STOP
}

// Metrics on an application's meter provider (here a ManualReader that the
// example reads at the end).
func ExampleMetrics() {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(ctx)

	sim := testkit.NewSim()
	defer sim.Close()
	l, _ := lock.New(sim.Connect(), "/app/locks/orders")
	stats, err := observers.Metrics(l, observers.WithMeterProvider(mp), observers.WithoutPath())
	if err != nil {
		panic(err)
	}
	for range 3 {
		if _, err := l.Acquire(ctx); err != nil {
			panic(err)
		}
		l.Release(ctx)
	}
	l.Close()
	<-stats.Done()

	var rm metricdata.ResourceMetrics
	reader.Collect(ctx, &rm)
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if h, ok := m.Data.(metricdata.Histogram[float64]); ok {
			for _, p := range h.DataPoints {
				outcome, _ := p.Attributes.Value(observers.AttrOutcome)
				fmt.Println(m.Name, outcome.AsString(), p.Count)
			}
		}
	}
	// Output:
	// zkrecipes.acquire.duration granted 3
	// zkrecipes.hold.duration stopped 3
}
