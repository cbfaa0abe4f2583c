# Proving-ground targets (see docs/proving-ground.md).
.PHONY: controlplane
controlplane: ## Build or reuse the proving-ground binaries
	@true
