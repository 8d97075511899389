"""Values and rules: messages, events, serde, tools, config, the stop-reason policy, pairing."""
