"""Encoding kinds: one small base per contract family (docs/contract.md)."""
