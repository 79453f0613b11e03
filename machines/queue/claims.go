package queue

import (
	"errors"
	"fmt"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/events"
)

// Acknowledged consumption: our claims, their acks and nacks (Consume's
// joined with the next claim), and the checks of writes whose replies
// were lost.

// claimedOurs notes our claim of e, which left the item at version, and
// delivers it. A version above 1 means a claim before ours: the item
// comes again (unless it went to no one).
func (m *machine) claimedOurs(o *out, e *entry, version int32) {
	if version > 1 && !e.ours {
		e.again = true
	}
	e.mine, e.retried, e.version = true, false, version
	m.claims[e.name] = claim{session: m.session, version: version}
	t := e.taker
	m.unbind(e)
	m.dropTaker(t)
	if t.withdrawn { // never out: given back
		m.endClaim(o, e.name, ackOp{nack: true, back: true})
		return
	}
	if e.again {
		m.event(o, events.Redelivered, m.node(e.name), nil)
		e.again = false
	}
	m.event(o, events.Claimed, m.node(e.name), nil)
	m.reply(o, t.req, taken{Name: e.name, Data: e.data, Session: m.session}, nil)
}

// claimSeen notes what our watch cmd on another consumer's claim on item
// name found: whether it is set, and whether the claim is gone (the item
// comes again, unless it was acked: then a listing says it is gone).
func (m *machine) claimSeen(cmd uint64, name string, watching, gone bool) {
	if e := m.entries[name]; e != nil && e.watch == cmd {
		if !watching {
			e.watch = 0
		}
		if gone {
			e.others, e.again = false, true
		}
	}
}

func (m *machine) claimLost(name string) error {
	return fmt.Errorf("%w: %s", ErrClaimLost, m.node(name))
}

// othersClaim notes that another consumer holds e's claim, and watches it.
func (m *machine) othersClaim(o *out, e *entry) {
	e.others = true
	if e.watch == 0 {
		e.watch = m.cmd()
		o.Commands = append(o.Commands, watchClaim{Cmd: e.watch, Name: e.name})
	}
}

// uncertain notes that our last write on e may or may not have been
// applied (its reply was lost); it is checked once the session is back.
func (m *machine) uncertain(o *out, e *entry) {
	m.uncert[e.name] = true
	if m.connected {
		m.sendCheck(o, e.name)
	}
}

// sendCheck asks what became of our write on item name (see uncertain).
func (m *machine) sendCheck(o *out, name string) {
	m.owed++
	o.Commands = append(o.Commands, checkItem{Cmd: m.cmd(), Name: name})
}

func (m *machine) checked(o *out, i checked) {
	m.owed--
	e := m.entries[i.Name]
	if e == nil {
		delete(m.uncert, i.Name)
		return
	}
	if !m.uncert[i.Name] {
		return // an earlier check settled it (every check in flight asks the same)
	}
	if i.Err != nil {
		m.uncertain(o, e) // checked again once connected
		return
	}
	if !m.onOurSession(i.Session) {
		return // judged by the session it was read on, when known (see resend)
	}
	delete(m.uncert, i.Name)
	if a, ok := m.acks[i.Name]; ok { // an ack or nack whose reply was lost
		delete(m.acks, i.Name)
		c := m.claims[e.name]
		live := c.session == m.session // no session ended since the claim
		switch {
		// While our claim lived, no one else could remove the item or
		// claim it: gone means our ack went through.
		case live && !i.ItemExists && !a.nack, live && a.nack && i.ClaimOwner != m.session:
			m.claimEnded(o, i.Name, e, a)
		case live && i.ClaimOwner == m.session && i.Version == c.version:
			e.retried = true
			m.endClaim(o, e.name, a)
		case !a.nack && !i.ItemExists:
			// Gone for good, by our ack or, after our session ended, by
			// another consumer's: it will not come again.
			delete(m.claims, e.name)
			e.mine = false
			m.markGone(e)
			m.reply(o, a.req, nil, fmt.Errorf("%w: %s: the ack's reply was lost with the session", ErrUncertain, m.node(e.name)))
		default:
			// The claim went with its session: the item comes again.
			delete(m.claims, e.name)
			e.mine, e.again = false, true
			m.reply(o, a.req, nil, m.claimLost(e.name))
		}
		return
	}
	if e.write != 0 {
		return // a write of ours went out after the one checked: its reply decides
	}
	e.retried = false
	switch t := e.taker; {
	case t == nil:
	case t.kind == kindClaim && i.ClaimOwner == m.session:
		m.claimedOurs(o, e, i.Version)
	case t.kind != kindClaim && !i.ItemExists:
		// Our delete may have been the one that removed it, or another
		// consumer's: we cannot tell, and an item is never lost, so it is
		// delivered, and its TAKEN event says so (ErrUncertain).
		m.deliverTaken(o, e, fmt.Errorf("%w: %s", ErrUncertain, m.node(e.name)))
	case !i.ItemExists:
		m.unbind(e)
		m.markGone(e)
	case i.ClaimOwner != 0 && t.kind == kindClaim:
		m.unbind(e)
		m.othersClaim(o, e)
	default:
		e.retried = true
		e.hasData = e.hasData && i.Version == e.version // a claim's set needs the version it read
		m.unbind(e)                                     // not applied: try again
	}
}

func (m *machine) ack(o *out, i ackCall) {
	c, ok := m.claims[i.Name]
	switch {
	case !ok || c.session != i.Session || c.session != m.session:
		m.reply(o, i.Req, nil, m.claimLost(i.Name))
	case m.acks[i.Name] != (ackOp{}):
		m.reply(o, i.Req, nil, fmt.Errorf("%w: %s: an ack or nack is in flight", ErrAcked, m.node(i.Name)))
	case i.Next && m.joinNext(o, i):
	default:
		m.endClaim(o, i.Name, ackOp{req: i.Req, nack: i.Nack, back: i.Back})
	}
}

// joinNext sends ack call i's endClaim in one multi with the claim of the
// item a TakeItem would get now, for the call: it answers with both. It
// sends nothing when that item's data is not cached yet, or when it has
// a priority (choosing one needs a listing after a sync first), or once
// the machine is shutting down.
func (m *machine) joinNext(o *out, i ackCall) bool {
	t := &taker{req: i.Req | claimPart, kind: kindClaim}
	if m.closing != 0 || m.givingBack() || !m.connected {
		return false
	}
	e := m.candidate()
	if e == nil || e.prio > 0 || !e.hasData {
		return false
	}
	m.takers = append(m.takers, t)
	e.taker, t.entry, e.write = t, e, m.cmd()
	m.acks[i.Name] = ackOp{cmd: e.write, req: i.Req, nack: i.Nack}
	m.joints[i.Req] = &joint{}
	m.owed += 2 // answered as acked and claimed
	o.Commands = append(o.Commands, endClaim{Cmd: e.write, Name: i.Name, Nack: i.Nack, Version: m.claims[i.Name].version,
		Next: e.name, Data: m.cfg.ClaimData, NextData: e.data, NextVersion: e.version})
	return true
}

// onOurSession: a request made on session (0: while it changed) was made
// on the one the machine knows.
func (m *machine) onOurSession(session int64) bool {
	return session != 0 && session == m.session
}

// endClaim acks or nacks our claim on item name, as a says, at the
// version our claim left: a newer claim's item does not match.
func (m *machine) endClaim(o *out, name string, a ackOp) {
	a.cmd = m.cmd()
	m.acks[name] = a
	m.owed++
	o.Commands = append(o.Commands, endClaim{Cmd: a.cmd, Name: name, Nack: a.nack, Version: m.claims[name].version})
}

func (m *machine) acked(o *out, i acked) {
	m.owed--
	a, ok := m.acks[i.Name]
	if !ok || a.cmd != i.Cmd {
		return
	}
	e := m.entries[i.Name]
	switch lost := errors.Is(i.Err, zk.ErrNoNode) || errors.Is(i.Err, zk.ErrBadVersion); {
	case errors.Is(i.Err, errNotApplied): // the next claim failed the multi: the ack alone
		m.endClaim(o, i.Name, a)
	case i.Err == nil:
		delete(m.acks, i.Name)
		m.claimEnded(o, i.Name, e, a)
	case lost && e != nil && e.retried:
		m.uncertain(o, e) // our first multi, sent before the check, may have landed since
	case lost:
		// Our claim was gone with its session, or the item claimed by
		// another since: nothing was applied, and the item comes again.
		delete(m.acks, i.Name)
		delete(m.claims, i.Name)
		if e != nil {
			e.mine, e.again = false, true
		}
		m.reply(o, a.req, nil, m.claimLost(i.Name))
	case errors.Is(i.Err, zk.ErrNoAuth): // refused: nothing was applied, our claim stays
		delete(m.acks, i.Name)
		m.reply(o, a.req, nil, i.Err)
	case e != nil: // the reply was lost: the write may have been applied
		m.uncertain(o, e)
	default:
		delete(m.acks, i.Name)
		delete(m.claims, i.Name)
		m.reply(o, a.req, nil, i.Err)
	}
}

// claimEnded: our ack (the item is gone) or nack (the item is back at its
// place) went through.
func (m *machine) claimEnded(o *out, name string, e *entry, a ackOp) {
	delete(m.claims, name)
	switch {
	case a.back:
	case a.nack:
		m.event(o, events.Nacked, m.node(name), nil)
	default:
		m.event(o, events.Acked, m.node(name), nil)
	}
	switch {
	case e != nil && a.nack:
		e.mine, e.again, e.ours, e.retried = false, e.again || !a.back, e.ours || a.back, false
	case e != nil:
		m.markGone(e)
	default:
		m.gone[name] = m.lists
	}
	m.reply(o, a.req, nil, nil)
}

// refused gives back what an answer no caller took had given (see
// runtime.Spec.Refused): the item a take removed is put back at its
// place; the claim a TakeItem, or an ack's next claim, made is given back
// (no NACKED, not a redelivery; takes wait for it).
func (m *machine) refused(o *out, t taken) {
	if t.Session == 0 {
		m.restoreItem(o, t.Name, t.Data)
		return
	}
	m.ack(o, ackCall{Name: t.Name, Session: t.Session, Nack: true, Back: true})
}
