"""Helpers for tests: a scripted OpenAI-compatible server and a driver for the real co program."""
