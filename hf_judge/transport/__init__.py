"""How requests travel: the HTTP client (retry policy, limits), a fleet of replicas, the local judge server,
and the prices that budgets and costs are counted at."""
