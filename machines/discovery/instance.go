package discovery

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	zkrecipes "github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/adapters/zk"
)

// ScopeName is the instrumentation scope of discovery's spans.
const ScopeName = "github.com/zkrecipes/zkrecipes/machines/discovery"

// Version is this package's version, reported with its spans.
const Version = "0.1.0"

// Errors of service discovery. Match them with errors.Is.
var (
	// ErrNoInstances: the provider's service has no instance (after its
	// first load).
	ErrNoInstances = errors.New("discovery: no instances")
	// ErrBadInstance: a node of the service whose data is not a service
	// instance's JSON. A provider leaves it out; its MEMBER_JOINED or
	// MEMBER_UPDATED event carries this error.
	ErrBadInstance = errors.New("discovery: not a service instance")
	// ErrInstanceExists: another live session holds the instance's node
	// (the error also matches group.ErrMemberExists). Nothing of the
	// other's is touched.
	ErrInstanceExists = errors.New("discovery: instance id held by another session")
	// ErrInvalidOption: an option's or the instance's value is refused (a
	// name or id that is not one node name, a payload that is not JSON,
	// an Update that changes the name or id, an option the function
	// cannot use). Nothing was sent.
	ErrInvalidOption = fmt.Errorf("discovery: %w", zkrecipes.ErrInvalidOption)
	// ErrCleanupPending: Close could not delete the instance's node in
	// time; the connection deletes it once the session is back, the
	// server once the session ends.
	ErrCleanupPending = fmt.Errorf("discovery: %w", zkrecipes.ErrCleanupPending)
	// ErrClosed: the handle or its connection is closed.
	ErrClosed = fmt.Errorf("discovery: %w", zkrecipes.ErrClosed)
)

// Instance is one instance of a service: curator-x-discovery's
// ServiceInstance, stored as its JSON in the node <base>/<Name>/<ID>.
type Instance struct {
	Name    string // the service's name: one node name
	ID      string // the instance's id: one node name, unique in the service
	Address string // "" is JSON null
	Port    int    // 0 is JSON null (Curator's unset port)
	SSLPort int    // 0 is JSON null (Curator's unset sslPort)
	// Payload is the instance's JSON payload (nil: null). Curator writes
	// a Map payload as an object whose first member is
	// "@class":"java.util.LinkedHashMap": that member is added when we
	// write an object without "@class", and taken out when we read it, so
	// Payload is the object both sides mean. Another class is kept as it
	// is. Use an object (or a string, number or boolean): Jackson reads
	// an array only in its own type-wrapped form.
	Payload json.RawMessage
	// RegistrationTimeUTC is registrationTimeUTC (milliseconds); Register
	// sets it to the time of the call when it is zero, Update keeps the
	// registered one.
	RegistrationTimeUTC time.Time
	ServiceType         string          // "DYNAMIC" (an ephemeral node), the only type Register makes; "" is DYNAMIC
	URISpec             json.RawMessage // Curator's uriSpec, kept as it is (nil: null)
}

// wire is Instance as curator-x-discovery 5.x's JsonInstanceSerializer
// writes it (compatible mode, its default: no "enabled"), in its order.
type wire struct {
	Name                string          `json:"name"`
	ID                  string          `json:"id"`
	Address             *string         `json:"address"`
	Port                *int            `json:"port"`
	SSLPort             *int            `json:"sslPort"`
	Payload             json.RawMessage `json:"payload"`
	RegistrationTimeUTC int64           `json:"registrationTimeUTC"`
	ServiceType         *string         `json:"serviceType"`
	URISpec             json.RawMessage `json:"uriSpec"`
}

const mapClass = `"@class":"java.util.LinkedHashMap"`

// nullable is nil for the zero value (JSON null).
func nullable[T comparable](v T) *T {
	var zero T
	if v == zero {
		return nil
	}
	return &v
}

func deref[T any](p *T) (v T) {
	if p != nil {
		v = *p
	}
	return v
}

// orNull is nil for JSON null.
func orNull(raw json.RawMessage) json.RawMessage {
	if string(raw) == "null" {
		return nil
	}
	return raw
}

// encode is inst's node data, as Curator writes it.
func encode(inst Instance) ([]byte, error) {
	w := wire{Name: inst.Name, ID: inst.ID, Address: nullable(inst.Address), Port: nullable(inst.Port),
		SSLPort: nullable(inst.SSLPort), Payload: inst.Payload, ServiceType: nullable(inst.ServiceType), URISpec: inst.URISpec}
	if !inst.RegistrationTimeUTC.IsZero() {
		w.RegistrationTimeUTC = inst.RegistrationTimeUTC.UnixMilli()
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(w.Payload, &obj) == nil && obj != nil && obj["@class"] == nil {
		rest := bytes.TrimSpace(w.Payload)[1:]
		if len(obj) > 0 {
			rest = append([]byte(","), rest...)
		}
		w.Payload = append([]byte("{"+mapClass), rest...)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // as Jackson: '<' stays '<'
	if err := enc.Encode(w); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOption, err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// decode reads a node's data as an Instance.
func decode(data []byte) (Instance, error) {
	var w wire
	if err := json.Unmarshal(data, &w); err != nil {
		return Instance{}, fmt.Errorf("%w: %w", ErrBadInstance, err)
	}
	inst := Instance{Name: w.Name, ID: w.ID, Address: deref(w.Address), Port: deref(w.Port), SSLPort: deref(w.SSLPort),
		Payload: orNull(w.Payload), ServiceType: deref(w.ServiceType), URISpec: orNull(w.URISpec)}
	if w.RegistrationTimeUTC != 0 {
		inst.RegistrationTimeUTC = time.UnixMilli(w.RegistrationTimeUTC).UTC()
	}
	if rest, ok := bytes.CutPrefix(inst.Payload, []byte("{"+mapClass)); ok {
		inst.Payload = append([]byte("{"), bytes.TrimPrefix(rest, []byte(","))...)
	}
	return inst, nil
}

// checkInstance refuses an instance Register cannot write.
func checkInstance(base string, inst Instance) error {
	if err := zk.ValidatePath(base); err != nil {
		return fmt.Errorf("discovery: %w", err)
	}
	for _, n := range []struct{ what, v string }{{"name", inst.Name}, {"id", inst.ID}} {
		if n.v == "" || strings.Contains(n.v, "/") || zk.ValidatePath(zk.Join(base, n.v)) != nil {
			return fmt.Errorf("%w: %s %q: it must be one node name", ErrInvalidOption, n.what, n.v)
		}
	}
	switch {
	case inst.Port < 0 || inst.Port > 65535 || inst.SSLPort < 0 || inst.SSLPort > 65535:
		return fmt.Errorf("%w: port %d, sslPort %d", ErrInvalidOption, inst.Port, inst.SSLPort)
	case inst.ServiceType != "" && inst.ServiceType != "DYNAMIC":
		return fmt.Errorf("%w: service type %q: a registration is DYNAMIC (an ephemeral node)", ErrInvalidOption, inst.ServiceType)
	case inst.Payload != nil && !json.Valid(inst.Payload), inst.URISpec != nil && !json.Valid(inst.URISpec):
		return fmt.Errorf("%w: payload or uriSpec is not JSON", ErrInvalidOption)
	}
	return nil
}
