"""Tables of sourced facts (Xid catalogue, tool error messages); each row names its source."""
