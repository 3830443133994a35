package broker

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka's TransactionStateManager.listTransactionStates names, in the response's
// UnknownStateFilters, every state filter that is not a transaction state
// (TransactionState.fromName fails: response.unknownStateFilters.add(stateName)), so the client
// learns its filter matched nothing because it was misspelt. Runnel never fills the field.
func TestListTransactionsUnknownStateFilters(t *testing.T) {
	_, addr, _ := ctBroker(t, nil)
	req := kmsg.NewPtrListTransactionsRequest()
	req.Version = 1
	req.StateFilters = []string{"Ongoing", "Running"}
	req.DurationFilterMillis = -1
	resp := ctRoundTrip(t, addr, req).(*kmsg.ListTransactionsResponse)
	if !slices.Equal(resp.UnknownStateFilters, []string{"Running"}) {
		t.Errorf("ListTransactions with state filters [Ongoing Running] answered unknown_state_filters %q; Kafka answers [Running]", resp.UnknownStateFilters)
	}
}

// Kafka keeps a transaction's start time through its completion (TransactionMetadata
// .prepareComplete does not reset txnStartTimestamp, and completeTransitionTo refuses a
// CompleteCommit/CompleteAbort with -1); only InitProducerId's Empty state has -1.
// TransactionCoordinator.handleDescribeTransactions answers txnStartTimestamp in every state,
// so kafka-transactions describe shows a completed transaction's last start. Runnel answers -1
// unless the transaction is Ongoing or preparing.
func TestDescribeCompletedTransactionStartTime(t *testing.T) {
	addr, _ := testBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admCl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer admCl.Close()
	if _, err := kadm.NewClient(admCl).CreateTopic(ctx, 1, 1, nil, "hunt-tx"); err != nil {
		t.Fatal(err)
	}
	p, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID("hunt-tid"), kgo.DefaultProduceTopic("hunt-tx"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	before := time.Now().UnixMilli()
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	var d kadm.DescribedTransaction
	for { // the markers may still be on their way: PrepareCommit until they are written
		described, err := kadm.NewClient(admCl).DescribeTransactions(ctx, "hunt-tid")
		if err != nil {
			t.Fatal(err)
		}
		if d = described["hunt-tid"]; d.Err == nil && d.State == "CompleteCommit" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("DescribeTransactions(hunt-tid) = %+v; want CompleteCommit", d)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if d.StartTimestamp < before-1000 {
		t.Errorf("a committed transaction is described with start time %d; Kafka answers its last transaction's start (>= %d)", d.StartTimestamp, before)
	}
}
