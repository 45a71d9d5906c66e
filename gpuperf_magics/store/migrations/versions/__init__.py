"""The steps of the store's schema, one file each; the revision of each is the schema version it
brings a store to. Never edit a released step."""
