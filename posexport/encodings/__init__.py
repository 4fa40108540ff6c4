"""Encodings other than rope (posexport.rope), one module each; the registry is posexport.registry."""
