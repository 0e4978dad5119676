"""A pod as a member's host (docs/scaling.md): ``host`` the Sandbox and its exec streams,
``manifests`` and ``template`` what is applied, ``rest``/``errors`` the API client's calls and
their failures, ``exec``/``relay``/``mux`` the streams, ``forward`` a port, ``doctor`` its
checks."""
