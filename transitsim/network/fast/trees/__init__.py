"""The pipelined trees (tree, double binary tree): fixed times, shared links, compiled passes."""
