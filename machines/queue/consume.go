package queue

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
)

// ConsumeOption configures Consume. A nil ConsumeOption is ignored.
type ConsumeOption func(*consumeOptions)

type consumeOptions struct{ concurrency int }

// WithConcurrency sets how many items Consume handles at once (at least
// 1; default 1).
func WithConcurrency(n int) ConsumeOption { return func(o *consumeOptions) { o.concurrency = n } }

// Consume claims items (TakeItem) and calls handle for each, with up to
// the configured concurrency at once, until ctx ends: an item whose handle
// returns nil is acked, one whose handle returns an error is nacked
// (delivered again). An item whose claim was lost meanwhile (the session
// ended), or whose ack failed, is delivered again too. handle gets ctx; the
// ack or nack of an item whose handle returned is sent even when ctx has
// ended since.
//
// Each of the concurrency workers claims its next item in the same multi
// as the ack (or nack) of its last one, when the handle's cache has one:
// an item costs about one write round trip, where TakeItem then Ack cost
// two.
//
// Consume returns nil when ctx ends, and the first error that stops it
// otherwise: ErrClosed once the Queue is closed; an error matching
// zk.ErrNoAuth when the server refuses a take or an ack for the
// connection's identity (the item is nacked first).
func (q *Queue) Consume(ctx context.Context, handle func(ctx context.Context, data []byte) error, opts ...ConsumeOption) error {
	o := consumeOptions{concurrency: 1}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.concurrency < 1 {
		return fmt.Errorf("%w: concurrency %d: it must be at least 1", ErrInvalidOption, o.concurrency)
	}
	if handle == nil {
		return fmt.Errorf("%w: nil handle", ErrInvalidOption)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg      sync.WaitGroup
		errOnce sync.Once
		first   error
	)
	stop := func(err error) {
		errOnce.Do(func() { first = err })
		cancel()
	}
	for range o.concurrency {
		wg.Go(func() {
			it, err := q.TakeItem(ctx)
			for err == nil {
				herr := handle(ctx, it.Data())
				// Acked or nacked even when ctx has ended since (within the
				// close timeout); while ctx lasts, the same multi claims the
				// next item, if the cache has one.
				actx, acancel := context.WithTimeout(context.WithoutCancel(ctx), q.o.closeTimeout)
				next, eerr := it.end(actx, herr != nil, ctx.Err() == nil)
				acancel()
				if errors.Is(eerr, zk.ErrNoAuth) {
					// Refused for our identity, as every ack would be: the
					// item is given back, if the server lets us.
					nctx, ncancel := context.WithTimeout(context.WithoutCancel(ctx), q.o.closeTimeout)
					_ = it.Nack(nctx)
					ncancel()
				}
				if errors.Is(eerr, ErrClosed) || errors.Is(eerr, zk.ErrNoAuth) {
					stop(eerr)
					return
				}
				// Any other error of the ack or nack leaves the item to come
				// again: its claim is lost (ErrClaimLost), or will be given
				// back when the session ends or the Queue is closed.
				switch {
				case next != nil:
					it = next
				case ctx.Err() != nil:
					err = ctx.Err()
				default:
					it, err = q.TakeItem(ctx)
				}
			}
			if ctx.Err() == nil {
				stop(err)
			}
		})
	}
	wg.Wait()
	return first
}
