"""Attachments: intake → sniff → decode → variants → artifact store; the vision catalog; the
planner that gates a message on transport capability and model vision (DESIGN §5).

This package knows no runtime: runtime-specific serialization lives in each runtime's adapter.
"""
