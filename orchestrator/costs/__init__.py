"""What teammates cost: the vendored price table (``prices``) and the ledger's accounting."""
