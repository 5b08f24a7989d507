package derive

// ConsumerOf is the name d reads the ingest streams under.
func ConsumerOf(d *Deriver) string { return d.consumer }
