"""Small file helpers shared by the stages."""
