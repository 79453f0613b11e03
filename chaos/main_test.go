package chaos

import (
	"flag"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

var chaosDuration = flag.Duration("chaos.duration", 15*time.Second,
	"how long TestChaos injects faults (the whole test takes about 20 s more)")

// chaosSeed returns the seed of the fault schedule: CHAOS_SEED if set,
// otherwise a random one, logged either way so that a run can be replayed.
func chaosSeed(t *testing.T) uint64 {
	t.Helper()
	if s := os.Getenv("CHAOS_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CHAOS_SEED=%q: %v", s, err)
		}
		t.Logf("chaos seed %d (from CHAOS_SEED)", seed)
		return seed
	}
	seed := rand.Uint64() >> 1
	t.Logf("chaos seed %d (replay with CHAOS_SEED=%d)", seed, seed)
	return seed
}

// logSeedOnFailure repeats the seed at the end of a failed test's output.
func logSeedOnFailure(t *testing.T, seed uint64) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("replay with CHAOS_SEED=%d", seed)
		}
	})
}
