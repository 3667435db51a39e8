// The handle maps of an instance's streams, events and graphs (each platform's Instance, under its
// mu): lookups that never dereference a stale or foreign handle.
#pragma once
#include <mutex>

namespace xmc::be {

// The object of a live handle, or an empty one (nullptr) when `h` names none.
template <class Map> typename Map::mapped_type find_handle(std::mutex &mu, Map &objects, typename Map::key_type h) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = objects.find(h);
    return it == objects.end() ? typename Map::mapped_type{} : it->second;
}

// Takes the object of `h` out of the map, so that the handle is refused from now on (a destroy
// whose wait comes after); an empty one when `h` names none.
template <class Map> typename Map::mapped_type take_handle(std::mutex &mu, Map &objects, typename Map::key_type h) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = objects.find(h);
    if (it == objects.end()) return typename Map::mapped_type{};
    typename Map::mapped_type taken = std::move(it->second);
    objects.erase(it);
    return taken;
}

} // namespace xmc::be
