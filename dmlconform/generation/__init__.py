"""Generation: legal and one-rule-broken descs, hypothesis strategies, input data."""
