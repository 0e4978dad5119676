"""The daemon side: its composition root (``main``), the control socket (``connections``,
``api``), the operations (``teams``), the per-member queues (``mailbox``), the member processes
(``supervisor``, ``restart_policy``, ``orphans``) and the journal (``journal``, ``queue``). It
imports the shared modules of ``orchestrator`` and the runtimes, never the client's."""
