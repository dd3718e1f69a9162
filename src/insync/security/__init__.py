"""Who a connection is and what it may do: principals, SASL authentication state, the authorizer (sans-IO)."""
