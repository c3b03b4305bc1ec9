package demoreceiver

// SetBeforeRecord makes each delivery call f just before it is checked and
// recorded, so that a test can release many at the same moment.
func SetBeforeRecord(rc *Receiver, f func()) { rc.beforeRecord = f }
