"""The stateful Agent: its state, its runs one at a time, open_agent."""
