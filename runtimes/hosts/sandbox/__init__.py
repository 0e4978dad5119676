"""A bubblewrap sandbox around any other host (docs/security.md): ``host`` the wrapper, ``plan``
the command line of a policy, ``probe`` what bubblewrap can do here, ``network`` and ``relay``
the member's network namespace, ``git_view`` git on a worktree as the member, ``doctor`` its
checks."""
