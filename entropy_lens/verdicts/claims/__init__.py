"""Each topic's claims: their records, their row rules, and the paper-table inputs their rows come from."""
