package topics

import (
	"testing"

	"github.com/runnel-dev/runnel/internal/logstore"
)

// TestBrokerConfigsThatLockClientsOut: dynamic broker configs Kafka's KafkaConfig validation
// refuses because they would shut every client out or empty every topic: max.connections 0,
// max.connections.per.ip 0 without overrides, and a cluster or node default log.retention.ms
// of 0. Runnel took them (the node then closed every new connection).
func TestBrokerConfigsThatLockClientsOut(t *testing.T) {
	f := logstore.NewFlusher(0)
	defer f.Close()
	r, err := Open(Options{DataDir: t.TempDir(), Flusher: f, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		configs map[string]string
		ok      bool
	}{
		{map[string]string{"max.connections": "0"}, false},
		{map[string]string{"max.connections": "1"}, true},
		{map[string]string{"max.connections.per.ip": "0"}, false},
		{map[string]string{"max.connections.per.ip": "0", "max.connections.per.ip.overrides": "127.0.0.1:5"}, true},
		{map[string]string{"log.retention.ms": "0"}, false},
		{map[string]string{"log.retention.ms": "-1"}, true},
		{map[string]string{"log.retention.ms": "1"}, true},
	} {
		for _, perBroker := range []bool{false, true} {
			if err := r.CheckBrokerConfigs(perBroker, c.configs); (err == nil) != c.ok {
				t.Errorf("CheckBrokerConfigs(node %v, %v) = %v; want ok %v", perBroker, c.configs, err, c.ok)
			}
		}
	}
}
