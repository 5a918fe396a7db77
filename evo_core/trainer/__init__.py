"""Policy training: policies, rollout engines, GRPO-family losses, the run loop's trainer side."""
