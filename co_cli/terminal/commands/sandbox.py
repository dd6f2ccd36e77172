"""``/sandbox``: how run_shell's commands run in this session, and the user's choice for it: ``off`` (as in their
shell), ``network`` (sandboxed, with the network), ``on`` (back to sandboxed, without the network)."""

from __future__ import annotations

from co_cli.terminal.commands.registry import CommandHost, command

USAGE = "usage: /sandbox [on | off | network]"


@command("sandbox", "[on | off | network]", "how shell commands run this session: sandboxed or not, network or not")
async def _sandbox(host: CommandHost, arg: str) -> None:
    state, settings = host.conv.state, host.loaded.settings
    word = arg.strip().lower()
    if word == "off":
        state.shell_sandbox = "off"
    elif word == "on":
        state.shell_sandbox = "on" if settings.shell_sandbox == "on" else "auto"
        state.shell_network = False
    elif word == "network":
        state.shell_sandbox = "on" if settings.shell_sandbox == "on" else "auto"
        state.shell_network = True
    elif word:
        host.error(USAGE)
        return
    host.info(status(host) + ("" if word else " (/sandbox on | off | network changes it for this session)"))


def status(host: CommandHost) -> str:
    """One line: how the next command runs."""
    from co_cli.tools.shell import shell_confinement

    confined, _ = shell_confinement(host.conv.deps)
    if confined.sandboxed:
        writable = " and ".join(str(path) for path in confined.writable)
        network = "with the network" if confined.network else "no network"
        return f"Shell commands run sandboxed: they may write only in {writable}; {network}."
    if confined.unavailable:
        return f"Shell commands run without a sandbox: {confined.unavailable}."
    return "Shell commands run without a sandbox, as in your shell (/sandbox on turns it back on)."
