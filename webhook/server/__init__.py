"""The HTTPS server: the runtime it serves from, the app and its handlers (the one place errors
become HTTP), the serve loop, TLS reload, metrics and logs. Never imports cluster or install."""
