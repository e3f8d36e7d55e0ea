typedef int saker_placeholder_proto;
