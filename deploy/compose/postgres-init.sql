-- One database per shard (docs/deployment.md#run-with-compose): K and P never share a
-- database, so no transaction can span them. Each service runs its own migrations.
CREATE DATABASE keys_0;
CREATE DATABASE keys_1;
CREATE DATABASE pastes_0;
CREATE DATABASE pastes_1;
