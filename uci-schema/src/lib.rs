//! UCI text format and the typed schema of `/etc/config/agentd`.
