package discovery_test

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	zkrecipes "github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/events"
	"github.com/zkrecipes/zkrecipes/machines/discovery"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// Two instances register; a provider on another session sees each, with
// its payload as registered, and each change of an Update; Close
// deregisters; Services lists the service.
func TestRegisterDiscover(t *testing.T) {
	testkit.ForEachTarget(t, func(t *testing.T, tg testkit.Target) {
		ctx := ctxT(t)
		p := must[*discovery.Provider](t)(discovery.NewProvider(tg.Connect(t), "/services", "api"))
		closeOnCleanup(t, p)
		if err := p.Initialized(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Instance(ctx); !errors.Is(err, discovery.ErrNoInstances) {
			t.Fatalf("Instance of no instances: %v, want ErrNoInstances", err)
		}
		r1 := must[*discovery.Registration](t)(discovery.Register(ctx, tg.Connect(t), "/services", inst("i-1", 5)))
		r2 := must[*discovery.Registration](t)(discovery.Register(ctx, tg.Connect(t), "/services", inst("i-2", 6)))
		waitInstances(t, p, "i-1@10.0.0.5:8080", "i-2@10.0.0.6:8080")
		got := p.Instances()[0]
		if string(got.Payload) != `{"zone":"a"}` || got.ServiceType != "DYNAMIC" || got.Name != "api" ||
			!got.RegistrationTimeUTC.Equal(r1.Instance().RegistrationTimeUTC) || got.SSLPort != 0 {
			t.Errorf("decoded %+v, registered %+v", got, r1.Instance())
		}
		if r1.Path() != "/services/api" || r1.Node() != "/services/api/i-1" || r1.ID() != "i-1" || r1.State() != events.StateReady {
			t.Errorf("registration: path %s node %s id %s state %s", r1.Path(), r1.Node(), r1.ID(), r1.State())
		}
		u := inst("i-1", 7)
		u.Port, u.SSLPort = 9090, 9443
		if err := r1.Update(ctx, u); err != nil {
			t.Fatal(err)
		}
		waitInstances(t, p, "i-1@10.0.0.7:9090", "i-2@10.0.0.6:8080")
		if got := p.Instances()[0]; got.SSLPort != 9443 || !got.RegistrationTimeUTC.Equal(r1.Instance().RegistrationTimeUTC) {
			t.Errorf("after Update: %+v", got)
		}
		names := must[[]string](t)(discovery.Services(ctx, tg.Connect(t), "/services"))
		if !slices.Equal(names, []string{"api"}) {
			t.Errorf("Services %q", names)
		}
		if err := r1.Close(); err != nil {
			t.Fatal(err)
		}
		waitInstances(t, p, "i-2@10.0.0.6:8080")
		if err := r1.Update(ctx, u); !errors.Is(err, discovery.ErrClosed) || !errors.Is(err, zkrecipes.ErrClosed) {
			t.Errorf("Update after Close: %v, want ErrClosed", err)
		}
		if err := r1.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		if err := r2.Close(); err != nil {
			t.Fatal(err)
		}
		waitInstances(t, p)
		if _, err := p.Instance(ctx); !errors.Is(err, discovery.ErrNoInstances) {
			t.Errorf("Instance after all left: %v", err)
		}
	})
}

var _ = json.Valid
