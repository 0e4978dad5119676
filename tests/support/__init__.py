"""What the tests share and no test module owns: fakes of the runtimes and of the servers they
talk to, builders of images, PDFs and toolchains, the real sshd and X server the e2e tests start,
and the waits on the daemon (docs/testing.md). A test module imports from here, never from
another test module (tests/unit/test_test_layout.py checks it)."""
