"""Local fakes of broker REST order APIs: real HTTP servers on 127.0.0.1."""
