/* placeholder: being written */
typedef int saker_placeholder_store_conformance;
