//! Simulated Azure + management cluster. See issue 3; built in `src/`.
