"""``evo serve POLICY``: an OpenAI-compatible server (vLLM-shaped) around a policy."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    @app.command("serve")
    def serve(
        policy: str = typer.Argument(..., help="A local model directory, 'tiny' (or 'tiny:qwen2'), or a TOML config with a \\[policy] table."),
        host: str = typer.Option("127.0.0.1", "--host", help="Address to bind."),
        port: int = typer.Option(8000, "--port", help="Port to bind (0 picks a free one)."),
        name: str = typer.Option(None, "--served-model-name", help="Model id clients send (default: the policy's name)."),
        seed: int = typer.Option(0, "--seed", help="Initialisation seed for 'tiny'."),
        device: str = typer.Option("cpu", "--device", help="torch device for the policy."),
    ) -> None:
        """Serve /v1/models, /v1/completions, /v1/chat/completions, /v1/load_lora_adapter and
        /update_weights_from_disk."""
        from evo_core.cli.app import fail
        from evo_core.serve import PolicySpecError, make_host, run_server
        from evo_core.trainer.policy import PolicyLoadError

        if not 0 <= port <= 65535:
            raise fail(f"--port {port} is not a TCP port")
        try:
            model_host = make_host(policy, name=name, seed=seed, device=device)
        except (PolicySpecError, PolicyLoadError) as exc:
            raise fail(str(exc))
        run_server(model_host, bind=host, port=port)
